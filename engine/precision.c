/* precision.c: the names of the CDP_PREC_* values (backend.h), written once
 * for --precision, the logs and the messages of every program. */
#include <string.h>
#include "backend.h"

/* indexed by CDP_PREC_* */
const char *const cdp_precision_names[] = { "fp32", "tf32", "bf16", "fp16", NULL };

const char *cdp_precision_name(int prec)
{
	return prec >= CDP_PREC_FP32 && prec <= CDP_PREC_FP16 ? cdp_precision_names[prec] : "?";
}

int cdp_precision_parse(const char *s)
{
	for (int i = CDP_PREC_FP32; s && i <= CDP_PREC_FP16; i++)
		if (strcmp(s, cdp_precision_names[i]) == 0)
			return i;
	return -1;
}
