#include "cdp_rng.h"
