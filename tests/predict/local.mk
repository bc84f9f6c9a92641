# tests/predict/: cdp-predict and cdp-evaluate from the shell.
TESTS += tests/predict/evaluate.sh tests/predict/evaluate_csv.sh tests/predict/evaluate_reg.sh
if HAVE_MPI
TESTS += tests/predict/predict.sh tests/predict/gis.sh tests/predict/classify.sh \
	tests/predict/classify_csv.sh tests/predict/init.sh tests/predict/tta.sh \
	tests/predict/finetune.sh tests/predict/init_norm.sh tests/predict/change.sh \
	tests/predict/siamese_change.sh tests/predict/siamese_absdiff.sh tests/predict/multilabel.sh
TESTS += tests/predict/tta_reg.sh tests/predict/outputs.sh
TESTS += tests/predict/ranks.sh
SAN_SCRIPT_TESTS += tests/predict/ranks.sh
UNIT_TEST_TOOLS += cdp-train$(EXEEXT) cdp-predict$(EXEEXT)
endif
EXTRA_DIST += tests/predict
