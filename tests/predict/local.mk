# tests/predict/: cdp-predict and cdp-evaluate from the shell.
TESTS += tests/predict/predict.sh tests/predict/evaluate.sh
EXTRA_DIST += tests/predict
