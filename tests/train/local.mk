# tests/train/: cdp-train's loader (C), and the trainer
# driven from the shell: training, failures, resume, devices, loss scaling,
# the two data paths and profiles. small.cfg, train_common.sh and metrics.sh
# are shared with tests/predict and tests/gpu. Built with cdp-train (HAVE_MPI).
TRAIN_TESTS = tests/train/test_loader tests/train/test_loader_sample tests/train/test_loader_raw \
	tests/train/test_loader_sources
if HAVE_MPI
UNIT_TESTS += $(TRAIN_TESTS)
check_PROGRAMS += $(TRAIN_TESTS)
# what test_loader, test_loader_sample and test_loader_raw run to make their pool
UNIT_TEST_TOOLS += cdp-tile$(EXEEXT) cdp-lmdbpack$(EXEEXT) cdp-keyshuffle$(EXEEXT)
TESTS += tests/train/profile.sh tests/train/train.sh tests/train/train_fail.sh \
	tests/train/resume_sync.sh tests/train/device.sh tests/train/loss_scale.sh \
	tests/train/data_path.sh tests/train/consensus.sh tests/train/standardize.sh \
	tests/train/plot.sh \
	tests/train/class_weights.sh \
	tests/train/buckets.sh tests/train/trace.sh tests/train/cfg_nesting.sh \
	tests/train/rundir.sh tests/train/pool_grow.sh tests/train/losses.sh tests/train/emastop.sh tests/train/augment.sh \
	tests/train/cfg_keys.sh tests/train/bf16.sh tests/train/unet_resnet.sh \
	tests/train/gradcomp.sh tests/train/mix.sh tests/train/bn_sync.sh \
	tests/train/fpn_deeplab.sh tests/train/regression.sh
TESTS += tests/train/multitarget.sh tests/train/overlap_auto.sh tests/train/step_per_bucket.sh \
	tests/train/threads.sh tests/train/logwrite.sh
endif
TRAIN_TEST_CPPFLAGS = $(TRAIN_CPPFLAGS) -I$(top_srcdir)/tests/unit -DCDP_SRCDIR='"$(abs_top_srcdir)"'
tests_train_test_loader_SOURCES = tests/train/test_loader.c tests/train/fixture.h
tests_train_test_loader_CPPFLAGS = $(TRAIN_TEST_CPPFLAGS)
tests_train_test_loader_LDADD = $(TRAIN_LIBS)
tests_train_test_loader_sources_SOURCES = tests/train/test_loader_sources.c tests/train/fixture.h
tests_train_test_loader_sources_CPPFLAGS = $(TRAIN_TEST_CPPFLAGS)
tests_train_test_loader_sources_LDADD = $(TRAIN_LIBS)
tests_train_test_loader_sample_SOURCES = tests/train/test_loader_sample.c tests/train/fixture.h
tests_train_test_loader_sample_CPPFLAGS = $(TRAIN_TEST_CPPFLAGS)
tests_train_test_loader_sample_LDADD = $(TRAIN_LIBS)
tests_train_test_loader_raw_SOURCES = tests/train/test_loader_raw.c tests/train/fixture.h
tests_train_test_loader_raw_CPPFLAGS = $(TRAIN_TEST_CPPFLAGS)
tests_train_test_loader_raw_LDADD = $(TRAIN_LIBS)
EXTRA_DIST += tests/train/gradcomp.sh tests/train/losses.sh tests/train/profile.sh tests/train/train.sh tests/train/train_fail.sh \
	tests/train/train_common.sh tests/train/resume_sync.sh tests/train/device.sh \
	tests/train/loss_scale.sh tests/train/metrics.sh tests/train/small.cfg tests/train/data_path.sh \
	tests/train/ckpt_nan.py tests/train/ckpt_drop.py tests/train/consensus.sh tests/train/consensus.py \
	tests/train/standardize.sh tests/train/plot.sh tests/train/plotcheck.py \
	tests/train/class_weights.sh \
	tests/train/buckets.sh tests/train/trace.sh tests/train/cfg_nesting.sh \
	tests/train/rundir.sh tests/train/pool_grow.sh tests/train/emastop.sh tests/train/emastop.py tests/train/augment.sh \
	tests/train/cfg_keys.sh tests/train/bf16.sh tests/train/mix.sh tests/train/bn_sync.sh \
	tests/train/regression.sh tests/train/unet_resnet.sh tests/train/fpn_deeplab.sh
EXTRA_DIST += tests/train/multitarget.sh tests/train/overlap_auto.sh tests/train/step_per_bucket.sh \
	tests/train/threads.sh tests/train/logwrite.sh
