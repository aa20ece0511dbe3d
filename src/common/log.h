/* SPDX-License-Identifier: Apache-2.0 */
/* log: structured JSON-lines logging to stderr for isolad (thread-safe). */
#ifndef ISOLA_LOG_H
#define ISOLA_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Sets the minimum level printed (default LOG_INFO). */
void log_set_level(enum log_level lvl);

/* Prints one JSON object per line: {"ts":..,"level":..,"msg":..}. Thread-safe. */
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
