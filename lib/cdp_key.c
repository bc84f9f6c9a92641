#include "cdp_key.h"
