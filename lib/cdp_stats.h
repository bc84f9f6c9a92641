#ifndef CDP_STATS_H
#define CDP_STATS_H
#endif
