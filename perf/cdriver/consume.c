/* Consume driver for perf/bench.py --c-consumer: the same consumer as bench.py's consume phase,
 * in C, so the client is not the bottleneck (the Python loop used 142% CPU vs the broker's 37%).
 *
 *   consume BOOTSTRAP TOPIC COUNT [MAX_SECONDS]
 *
 * Assigns every partition of TOPIC from the beginning, reads until COUNT messages or MAX_SECONDS
 * (default 60) and prints one JSON line. seconds, rates and CPU are measured from the first message
 * to the last (like bench.py); first_message_ms is assign() to the first message.
 * Build: make -C perf/cdriver (or gcc -O2 -o /tmp/kconsume perf/cdriver/consume.c -lrdkafka).
 * Debian 12's librdkafka (2.0.2) lacks fetch.queue.backoff.ms; `make -C perf/cdriver wheel` links
 * the librdkafka bundled in .venv's confluent-kafka wheel instead (the one bench.py's Python
 * consumer uses), with the system headers - the C API is stable. */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void cpu_s(double *user, double *sys) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
    *sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void set(rd_kafka_conf_t *conf, const char *key, const char *value) {
    char err[512];
    rd_kafka_conf_res_t res = rd_kafka_conf_set(conf, key, value, err, sizeof err);
    if (res == RD_KAFKA_CONF_UNKNOWN && !strcmp(key, "fetch.queue.backoff.ms")) {
        /* librdkafka < 2.2 (Debian 12's 2.0.2): no such property, the 1 s backoff applies */
        fprintf(stderr, "warning: librdkafka %s has no %s\n", rd_kafka_version_str(), key);
        return;
    }
    if (res != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "%s=%s: %s\n", key, value, err);
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s BOOTSTRAP TOPIC COUNT [MAX_SECONDS]\n", argv[0]);
        return 2;
    }
    const char *topic = argv[2];
    long long want = atoll(argv[3]);
    double max_seconds = argc > 4 ? atof(argv[4]) : 60.0;
    char err[512], group[64];

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    snprintf(group, sizeof group, "bench-c-%ld-%ld", (long)getpid(), (long)time(NULL));
    set(conf, "bootstrap.servers", argv[1]);
    set(conf, "group.id", group);
    set(conf, "enable.auto.commit", "false");
    set(conf, "fetch.max.bytes", "52428800"); /* 50 MiB, as bench.py */
    set(conf, "fetch.queue.backoff.ms", "10"); /* as bench.py: no 1 s pause on a full queue */
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", err);
        return 1;
    }
    rd_kafka_poll_set_consumer(rk);

    double t_assign = now_s();
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
    if (e || md->topic_cnt != 1 || md->topics[0].err) {
        fprintf(stderr, "metadata for %s: %s\n", topic,
                rd_kafka_err2str(e ? e : md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC));
        return 1;
    }
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
    for (int i = 0; i < md->topics[0].partition_cnt; i++)
        rd_kafka_topic_partition_list_add(parts, topic, md->topics[0].partitions[i].id)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    if ((e = rd_kafka_assign(rk, parts))) {
        fprintf(stderr, "assign: %s\n", rd_kafka_err2str(e));
        return 1;
    }
    rd_kafka_topic_partition_list_destroy(parts);

    long long msgs = 0, bytes = 0, errors = 0;
    double t0 = 0, t_last = 0, u0 = 0, s0 = 0, u1 = 0, s1 = 0;
    double deadline = t_assign + max_seconds;
    while (msgs < want && now_s() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
        if (!m)
            continue;
        if (m->err) {
            if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                errors++;
        } else {
            if (msgs == 0) {
                t0 = now_s();
                cpu_s(&u0, &s0);
            }
            msgs++;
            bytes += (long long)m->len;
        }
        rd_kafka_message_destroy(m);
    }
    t_last = now_s();
    cpu_s(&u1, &s1);
    double secs = msgs ? t_last - t0 : 0.0;
    printf("{\"msgs\": %lld, \"bytes\": %lld, \"seconds\": %.6f, \"msg_per_s\": %.1f, \"mb_per_s\": %.3f, "
           "\"cpu_user_s\": %.4f, \"cpu_sys_s\": %.4f, \"first_message_ms\": %.1f, \"errors\": %lld, "
           "\"librdkafka\": \"%s\"}\n",
           msgs, bytes, secs, secs > 0 ? msgs / secs : 0.0, secs > 0 ? bytes / secs / (1 << 20) : 0.0,
           u1 - u0, s1 - s0, msgs ? (t0 - t_assign) * 1000 : -1.0, errors, rd_kafka_version_str());
    fflush(stdout);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return msgs == want ? 0 : 1;
}
