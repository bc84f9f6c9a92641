#include "cdp_pool.h"
