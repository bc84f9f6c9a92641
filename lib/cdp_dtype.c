#include "cdp_dtype.h"
