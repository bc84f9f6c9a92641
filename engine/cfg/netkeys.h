/* netkeys.h: every [net] key some part of the engine reads, one line a
 * key, grouped by the file that reads it (cdp-model(5) documents each).
 * A key that is not here is refused with "did you mean" (cfg_keys.c);
 * a value a cfg names only for its own ${} expressions goes in [vars].
 * Adding a [net] key: add CDP_NETKEY(name) to its reader's group, and the
 * same name to NET_KEYS in python/cdpool/cfg.py (tests/python checks both
 * lists agree), and to the list of new keys at the end. Included with
 * CDP_NETKEY defined by the includer.
 */
/* net.c: the input and the head */
CDP_NETKEY(channels)
CDP_NETKEY(in_h)
CDP_NETKEY(in_w)
CDP_NETKEY(classes)
CDP_NETKEY(ignore)
CDP_NETKEY(lr_mult)
CDP_NETKEY(bn_sync)
/* loss.c */
CDP_NETKEY(loss)
CDP_NETKEY(loss_weights)
CDP_NETKEY(class_weights)
CDP_NETKEY(dice_smooth)
CDP_NETKEY(focal_gamma)
CDP_NETKEY(focal_alpha)
CDP_NETKEY(tversky_alpha)
CDP_NETKEY(tversky_beta)
CDP_NETKEY(label_smoothing)
CDP_NETKEY(huber_delta)
/* augment.c */
CDP_NETKEY(aug_hflip)
CDP_NETKEY(aug_vflip)
CDP_NETKEY(aug_rot90)
CDP_NETKEY(crop_h)
CDP_NETKEY(crop_w)
CDP_NETKEY(aug_brightness)
CDP_NETKEY(aug_brightness_p)
CDP_NETKEY(aug_contrast)
CDP_NETKEY(aug_contrast_p)
CDP_NETKEY(aug_gamma)
CDP_NETKEY(aug_gamma_p)
CDP_NETKEY(aug_band_jitter)
CDP_NETKEY(aug_band_jitter_p)
CDP_NETKEY(aug_noise)
CDP_NETKEY(aug_noise_p)
CDP_NETKEY(aug_scale)
CDP_NETKEY(aug_scale_p)
CDP_NETKEY(aug_rotate)
CDP_NETKEY(aug_rotate_p)
CDP_NETKEY(mixup_alpha)
CDP_NETKEY(cutmix_alpha)
CDP_NETKEY(mix_prob)
CDP_NETKEY(mix_switch_prob)
/* optim.c */
CDP_NETKEY(optimizer)
CDP_NETKEY(lr_policy)
CDP_NETKEY(lr)
CDP_NETKEY(momentum)
CDP_NETKEY(nesterov)
CDP_NETKEY(weight_decay)
CDP_NETKEY(beta1)
CDP_NETKEY(beta2)
CDP_NETKEY(adam_eps)
CDP_NETKEY(lr_step)
CDP_NETKEY(lr_gamma)
CDP_NETKEY(lr_min)
CDP_NETKEY(warmup)
CDP_NETKEY(warmup_factor)
CDP_NETKEY(clip_norm)
CDP_NETKEY(accumulate)
CDP_NETKEY(ema)
/* The keys above that the engine came to read after the old rule ended
 * (commit 7cc6895, 2026-12-02: before it any [net] key was taken, an
 * unknown one being a variable; cdp-checkpoint(5)). In the cfg of a
 * checkpoint written under the old rule such a key was a variable, read
 * by nothing, and it stays one: cdp_cfg_parse_rule drops it from [net]
 * (ema=0.9 there must not start a moving average on --resume). Only
 * with CDP_NETKEY_NEW defined; python/cdpool/cfg.py's NET_KEYS_NEW
 * holds the same names. */
#ifdef CDP_NETKEY_NEW
CDP_NETKEY_NEW(lr_mult)
CDP_NETKEY_NEW(bn_sync)
CDP_NETKEY_NEW(huber_delta)
CDP_NETKEY_NEW(aug_brightness)
CDP_NETKEY_NEW(aug_brightness_p)
CDP_NETKEY_NEW(aug_contrast)
CDP_NETKEY_NEW(aug_contrast_p)
CDP_NETKEY_NEW(aug_gamma)
CDP_NETKEY_NEW(aug_gamma_p)
CDP_NETKEY_NEW(aug_band_jitter)
CDP_NETKEY_NEW(aug_band_jitter_p)
CDP_NETKEY_NEW(aug_noise)
CDP_NETKEY_NEW(aug_noise_p)
CDP_NETKEY_NEW(aug_scale)
CDP_NETKEY_NEW(aug_scale_p)
CDP_NETKEY_NEW(aug_rotate)
CDP_NETKEY_NEW(aug_rotate_p)
CDP_NETKEY_NEW(mixup_alpha)
CDP_NETKEY_NEW(cutmix_alpha)
CDP_NETKEY_NEW(mix_prob)
CDP_NETKEY_NEW(mix_switch_prob)
CDP_NETKEY_NEW(ema)
#endif
