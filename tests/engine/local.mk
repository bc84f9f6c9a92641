# tests/engine/: the engine without MPI: backend ops, gradients, nets, the
# model language, losses, optimizers, checkpoints, whole-model overfit and
# determinism, the backend tables and cdp-model(5) against the code, and
# model_dump (the engine's view of a model as JSON, for tests/parity and
# bench/), ckpt_edit (a checkpoint rewritten with a hostile cfg or class
# names under a valid CRC, for tests/train and tests/python). Built with
# the engine (HAVE_OPENBLAS).
ENGINE_TESTS = tests/engine/test_backend tests/engine/test_grad tests/engine/test_net \
	tests/engine/test_cfg tests/engine/test_loss tests/engine/test_optim tests/engine/test_freeze \
	tests/engine/test_checkpoint tests/engine/test_ckpt_rank \
	tests/engine/test_overfit tests/engine/test_determinism tests/engine/test_window \
	tests/engine/test_metrics tests/engine/test_augment tests/engine/test_backend_table tests/engine/test_model_doc \
	tests/engine/test_stash tests/engine/test_infer_pass tests/engine/test_bf16_sets \
	tests/engine/test_bn_pool tests/engine/test_bf16_grads
# the corpus replays of the fuzz harnesses (tests/fuzz/, doc/FUZZING.md)
ENGINE_TESTS += tests/engine/test_fuzz_ckpt tests/engine/test_fuzz_cfg
if HAVE_OPENBLAS
UNIT_TESTS += $(ENGINE_TESTS)
check_PROGRAMS += $(ENGINE_TESTS) tests/engine/model_dump tests/engine/ckpt_edit
endif
ENGINE_TEST_CPPFLAGS = $(ENGINE_CPPFLAGS) -I$(top_srcdir)/tests/unit -DCDP_SRCDIR='"$(abs_top_srcdir)"'
tests_engine_test_backend_SOURCES = tests/engine/test_backend.c tests/engine/test_backend_ops.h \
	tests/engine/conv_ref.h
tests_engine_test_backend_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_backend_LDADD = $(ENGINE_LIBS)
tests_engine_test_bf16_sets_SOURCES = tests/engine/test_bf16_sets.c tests/engine/conv_ref.h \
	tests/engine/bf16_sets.h
tests_engine_test_bf16_sets_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_bf16_sets_LDADD = $(ENGINE_LIBS)
tests_engine_test_grad_SOURCES = tests/engine/test_grad.c
tests_engine_test_grad_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_grad_LDADD = $(ENGINE_LIBS)
tests_engine_test_net_SOURCES = tests/engine/test_net.c
tests_engine_test_net_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_net_LDADD = $(ENGINE_LIBS)
tests_engine_test_cfg_SOURCES = tests/engine/test_cfg.c
tests_engine_test_cfg_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_cfg_LDADD = $(ENGINE_LIBS)
tests_engine_test_loss_SOURCES = tests/engine/test_loss.c
tests_engine_test_loss_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_loss_LDADD = $(ENGINE_LIBS)
tests_engine_test_optim_SOURCES = tests/engine/test_optim.c
tests_engine_test_optim_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_optim_LDADD = $(ENGINE_LIBS)
tests_engine_test_freeze_SOURCES = tests/engine/test_freeze.c
tests_engine_test_freeze_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_freeze_LDADD = $(ENGINE_LIBS)
tests_engine_test_checkpoint_SOURCES = tests/engine/test_checkpoint.c
tests_engine_test_checkpoint_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_checkpoint_LDADD = $(ENGINE_LIBS)
tests_engine_test_ckpt_rank_SOURCES = tests/engine/test_ckpt_rank.c
tests_engine_test_ckpt_rank_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_ckpt_rank_LDADD = $(ENGINE_LIBS)
tests_engine_test_overfit_SOURCES = tests/engine/test_overfit.c tests/engine/test_models.h
tests_engine_test_overfit_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_overfit_LDADD = $(ENGINE_LIBS)
tests_engine_test_determinism_SOURCES = tests/engine/test_determinism.c tests/engine/test_models.h
tests_engine_test_determinism_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_determinism_LDADD = $(ENGINE_LIBS)
tests_engine_test_bf16_grads_SOURCES = tests/engine/test_bf16_grads.c tests/engine/bf16_sets.h
tests_engine_test_bf16_grads_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_bf16_grads_LDADD = $(ENGINE_LIBS)
tests_engine_test_bn_pool_SOURCES = tests/engine/test_bn_pool.c tests/engine/test_models.h
tests_engine_test_bn_pool_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_bn_pool_LDADD = $(ENGINE_LIBS)
tests_engine_test_stash_SOURCES = tests/engine/test_stash.c tests/engine/test_models.h
tests_engine_test_stash_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_stash_LDADD = $(ENGINE_LIBS)
tests_engine_test_infer_pass_SOURCES = tests/engine/test_infer_pass.c tests/engine/test_models.h
tests_engine_test_infer_pass_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_infer_pass_LDADD = $(ENGINE_LIBS)
tests_engine_test_window_SOURCES = tests/engine/test_window.c
tests_engine_test_window_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_window_LDADD = $(ENGINE_LIBS)
tests_engine_model_dump_SOURCES = tests/engine/model_dump.c
tests_engine_model_dump_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_model_dump_LDADD = $(ENGINE_LIBS)
tests_engine_ckpt_edit_SOURCES = tests/engine/ckpt_edit.c
tests_engine_ckpt_edit_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_ckpt_edit_LDADD = $(ENGINE_LIBS)
tests_engine_test_metrics_SOURCES = tests/engine/test_metrics.c
tests_engine_test_metrics_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_metrics_LDADD = $(ENGINE_LIBS)
tests_engine_test_backend_table_SOURCES = tests/engine/test_backend_table.c
tests_engine_test_backend_table_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_engine_test_backend_table_LDADD = $(ENGINE_LIBS)
# It sees which options the code reads by wrapping the cfg lookups.
tests_engine_test_model_doc_SOURCES = tests/engine/test_model_doc.c
tests_engine_test_model_doc_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_model_doc_LDFLAGS = $(AM_LDFLAGS) \
	-Wl,--wrap=cdp_cfg_str -Wl,--wrap=cdp_cfg_int -Wl,--wrap=cdp_cfg_float \
	-Wl,--wrap=cdp_cfg_float_below
tests_engine_test_model_doc_LDADD = $(ENGINE_LIBS)
tests_engine_test_augment_SOURCES = tests/engine/test_augment.c
tests_engine_test_augment_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_augment_LDADD = $(ENGINE_LIBS)
tests_engine_test_fuzz_ckpt_SOURCES = tests/engine/test_fuzz_ckpt.c tests/fuzz/fuzz_ckpt_body.h \
	tests/fuzz/fuzz_replay.h
tests_engine_test_fuzz_ckpt_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_fuzz_ckpt_LDADD = $(ENGINE_LIBS)
tests_engine_test_fuzz_cfg_SOURCES = tests/engine/test_fuzz_cfg.c tests/fuzz/fuzz_cfg_body.h \
	tests/fuzz/fuzz_replay.h
tests_engine_test_fuzz_cfg_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_test_fuzz_cfg_LDADD = $(ENGINE_LIBS)
# losses.sh: every loss of loss.h against PyTorch through loss_dump
if HAVE_OPENBLAS
check_PROGRAMS += tests/engine/loss_dump
TESTS += tests/engine/losses.sh
# reg_losses.sh: the regression losses against PyTorch through loss_dump
TESTS += tests/engine/reg_losses.sh
endif
tests_engine_loss_dump_SOURCES = tests/engine/loss_dump.c
tests_engine_loss_dump_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_loss_dump_LDADD = $(ENGINE_LIBS)
EXTRA_DIST += tests/engine/losses.sh tests/engine/loss_ref.py tests/engine/reg_losses.sh \
	tests/engine/reg_ref.py
# mix.sh: MixUp and CutMix (augment.h) against NumPy through mix_dump
if HAVE_OPENBLAS
check_PROGRAMS += tests/engine/mix_dump
TESTS += tests/engine/mix.sh
endif
tests_engine_mix_dump_SOURCES = tests/engine/mix_dump.c
tests_engine_mix_dump_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_engine_mix_dump_LDADD = $(ENGINE_LIBS)
EXTRA_DIST += tests/engine/mix.sh tests/engine/mix_ref.py
