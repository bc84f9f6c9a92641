#include "cdp_stats.h"
