#include "cdp_num.h"
