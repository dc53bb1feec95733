/* Produce driver for perf/bench.py --c-producer and perf/scale_bench.py --c-producer: the same
 * producer as bench.py's produce phases, in C, so that the client's Python produce() loop (one
 * thread at ~100% of a core with 1,000 partitions) is not what the figure measures.
 *
 *   produce BOOTSTRAP TOPIC COUNT ACKS [LINGER_MS] [MAX_SECONDS]
 *
 * COUNT messages of 1 KiB (random hex, so compression would not flatter anything), keys cycling
 * over "0".."999" as bench.py, linger.ms LINGER_MS (default 5), batch.size 1 MiB, no idempotence,
 * 256 MiB of local queue. Prints one JSON line: delivered messages, wall seconds from the first
 * produce() to the end of flush() (as bench.py), the process's user/system CPU over the same time.
 * Every loop stops by count and by MAX_SECONDS (default 60).
 * Build: make -C perf/cdriver wheel (librdkafka of .venv's confluent-kafka, as the Python phases). */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define VALUE_BYTES 1024

static long long delivered, failed;

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
    if (rd_kafka_conf_set(conf, key, value, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "%s=%s: %s\n", key, value, err);
        exit(2);
    }
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err)
        failed++;
    else
        delivered++;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s BOOTSTRAP TOPIC COUNT ACKS [LINGER_MS] [MAX_SECONDS]\n", argv[0]);
        return 2;
    }
    const char *topic = argv[2];
    long long want = atoll(argv[3]);
    const char *linger = argc > 5 ? argv[5] : "5";
    double max_seconds = argc > 6 ? atof(argv[6]) : 60.0;
    char err[512];

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", argv[1]);
    set(conf, "acks", argv[4]);
    set(conf, "linger.ms", linger);
    set(conf, "batch.size", "1048576");
    set(conf, "enable.idempotence", "false");
    set(conf, "queue.buffering.max.kbytes", "262144");
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", err);
        return 1;
    }
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);

    static const char hex[] = "0123456789abcdef";
    char value[VALUE_BYTES];
    srand((unsigned)time(NULL));
    for (int i = 0; i < VALUE_BYTES; i++)
        value[i] = hex[rand() % 16];
    char key[8];

    double u0, s0, u1, s1;
    double t0 = now_s();
    cpu_s(&u0, &s0);
    double deadline = t0 + max_seconds;
    long long sent = 0;
    while (sent < want && now_s() < deadline) {
        int klen = snprintf(key, sizeof key, "%lld", sent % 1000);
        if (rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, value, VALUE_BYTES, key,
                             (size_t)klen, NULL) == 0) {
            sent++;
            if ((sent & 1023) == 0)
                rd_kafka_poll(rk, 0); /* serve delivery reports as the Python loop's produce() does */
        } else if (rd_kafka_last_error() == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(rk, 5);
        } else {
            fprintf(stderr, "produce: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
            return 1;
        }
    }
    double left = deadline - now_s() + 10;
    rd_kafka_flush(rk, (int)(1000 * (left > 1 ? left : 1)));
    double t1 = now_s();
    cpu_s(&u1, &s1);
    double secs = t1 - t0;
    printf("{\"sent\": %lld, \"delivered\": %lld, \"errors\": %lld, \"seconds\": %.6f, \"msg_per_s\": %.1f, "
           "\"cpu_user_s\": %.4f, \"cpu_sys_s\": %.4f, \"librdkafka\": \"%s\"}\n",
           sent, delivered, failed, secs, secs > 0 ? delivered / secs : 0.0, u1 - u0, s1 - s0,
           rd_kafka_version_str());
    fflush(stdout);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return delivered == want ? 0 : 1;
}
