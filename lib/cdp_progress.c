#include "cdp_progress.h"
