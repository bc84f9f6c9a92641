#include "cdp_error.h"
