/* The per-record loop of kafkapy.protocol.record_walk in C: the same walk at 10-20 ns a record.
 *
 * Why: the walk runs over every record of every produced batch, and in Python it costs about
 * 1 us per record, which the produce path cannot afford. This module is optional: without a
 * compiler the package is installed without it and record_walk uses its Python loop, which stays
 * the reference. Both must give the same answer for any bytes: record_walk.py's `_walk` docstring
 * and the differential test (tests/protocol/test_record_walk_c.py) hold this file to it.
 *
 * walk(data, start, end, count, require_key, low, high)
 *     -> (position after the last record, largest timestamp delta,
 *         [index of a keyless record], [(index, timestamp delta) outside [low, high]])
 * raises RecordFault((index, kind, value)) for the first malformed record; record_walk.py turns
 * the kind into the Python walk's MalformedRecordError message.
 *
 * The bytes are untrusted: every read is checked against the buffer's length (not `end`: the
 * Python walk reads past a batch's end into the rest of the buffer the same way, and fails on
 * the record's length check), positions are 64-bit and grow by at most 2^31 between two checked
 * reads, and varints are at most 5 (10 for the timestamp delta) bytes. A large region is walked
 * without the GIL, so a walk on a worker thread does not hold up the event loop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The fault kinds, in the order of record_walk._FAULTS. */
enum {
    F_PREMATURE_END,  /* a read past the buffer: value = the record's length, -1 if unread */
    F_SIZE,           /* record length out of [6, remaining]: value = length, extra = remaining */
    F_READ_SIZE,      /* the fields do not add up to the length: value = length, extra = read */
    F_OFFSET,         /* offset delta is not the index: value = raw varint */
    F_KEY_SIZE,       /* negative key length below -1: value = raw varint */
    F_VALUE_SIZE,     /* negative value length below -1: value = raw varint */
    F_VARINT_RANGE,   /* a 5-byte varint over 32 bits, a 10-byte one over 64 */
    F_VARINT_LONG,    /* a varint longer than its maximum: value = the maximum */
    F_HEADER_COUNT,   /* header count negative or more than the record holds: value = count */
    F_HEADER_KEY,     /* a null or negative header key length: value = raw varint */
    F_HEADER_VALUE,   /* negative header value length below -1: value = raw varint */
};

#define MIN_RECORD_BODY 6
#define NOGIL_BYTES (1 << 20)
#define POSITION_LIMIT (1LL << 62)

typedef struct {
    int kind;
    long long value, extra;
} Fault;

typedef struct {
    long long *items;
    Py_ssize_t size, capacity;
    int failed;
} Marks;

static PyObject *RecordFault;

/* Append one number to `marks` (no GIL needed); an allocation failure is reported at the end. */
static void
mark(Marks *marks, long long item)
{
    if (marks->failed) {
        return;
    }
    if (marks->size == marks->capacity) {
        Py_ssize_t capacity = marks->capacity ? marks->capacity * 2 : 16;
        long long *items = realloc(marks->items, (size_t)capacity * sizeof(long long));
        if (items == NULL) {
            marks->failed = 1;
            return;
        }
        marks->items = items;
        marks->capacity = capacity;
    }
    marks->items[marks->size++] = item;
}

/* The raw (still zigzag) varint at *p of at most `max_bytes` bytes: 0 with *p after it, 1 for a
 * read past the buffer, 2 for a malformed varint (in `fault`). */
static inline int
varint(const uint8_t *d, long long n, long long *p, int max_bytes, uint64_t *out, Fault *fault)
{
    long long at = *p;
    if (at < n && d[at] < 0x80) {
        *out = d[at];
        *p = at + 1;
        return 0;
    }
    uint64_t raw = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++, at++, shift += 7) {
        if (at >= n) {
            return 1;
        }
        uint8_t b = d[at];
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            int over = max_bytes == 5 ? (raw >> 32) != 0 : (shift == 63 && (b & 0x7F) > 1);
            if (over) {
                fault->kind = F_VARINT_RANGE;
                return 2;
            }
            *out = raw;
            *p = at + 1;
            return 0;
        }
    }
    fault->kind = F_VARINT_LONG;
    fault->value = max_bytes;
    return 2;
}

static inline long long
zigzag(uint64_t raw)
{
    return (long long)(raw >> 1) ^ -(long long)(raw & 1);
}

/* Skip a record's headers (count at *p): as record_walk._skip_headers. */
static int
skip_headers(const uint8_t *d, long long n, long long *p, long long record_end, Fault *fault)
{
    uint64_t raw;
    int r = varint(d, n, p, 5, &raw, fault);
    if (r) {
        return r;
    }
    long long count = zigzag(raw);
    if (count < 0 || count * 2 > record_end - *p) {
        fault->kind = F_HEADER_COUNT;
        fault->value = count;
        return 2;
    }
    for (long long i = 0; i < count; i++) {
        if ((r = varint(d, n, p, 5, &raw, fault))) {
            return r;
        }
        if (raw & 1) {
            fault->kind = F_HEADER_KEY;
            fault->value = (long long)raw;
            return 2;
        }
        *p += (long long)(raw >> 1);
        if ((r = varint(d, n, p, 5, &raw, fault))) {
            return r;
        }
        if (!(raw & 1)) {
            *p += (long long)(raw >> 1);
        }
        else if (raw != 1) {
            fault->kind = F_HEADER_VALUE;
            fault->value = (long long)raw;
            return 2;
        }
        if (*p > record_end) {
            break;
        }
    }
    return 0;
}

typedef struct {
    const uint8_t *d;
    long long n, end, count;
    int require_key, always_out;
    long long low, high;
    /* results */
    long long at, largest, index;
    Fault fault;
    Marks keyless, out_of_range;
} Walk;

#define STEP(call) do { int r_ = (call); if (r_) { return r_; } } while (0)

/* One record at w->at: 0 (w->at moved past it), 1 past the buffer, 2 malformed (w->fault). */
static inline int
walk_one(Walk *w, long long index, long long *length)
{
    const uint8_t *d = w->d;
    long long n = w->n, p = w->at;
    uint64_t raw;
    Fault *fault = &w->fault;
    STEP(varint(d, n, &p, 5, &raw, fault));
    long long len = zigzag(raw);
    long long at = p;
    if (len < MIN_RECORD_BODY || len > w->end - at) {
        fault->kind = F_SIZE;
        fault->value = len;
        fault->extra = w->end - at;
        return 2;
    }
    *length = len;
    p = at + 1;  /* the attributes byte is not read, as in magic v2 it carries nothing to check */
    STEP(varint(d, n, &p, 10, &raw, fault));
    long long delta = zigzag(raw);
    STEP(varint(d, n, &p, 5, &raw, fault));
    if (raw != (uint64_t)index << 1) {
        fault->kind = F_OFFSET;
        fault->value = (long long)raw;
        return 2;
    }
    STEP(varint(d, n, &p, 5, &raw, fault));  /* key length */
    if (raw & 1) {
        if (raw != 1) {
            fault->kind = F_KEY_SIZE;
            fault->value = (long long)raw;
            return 2;
        }
        if (w->require_key) {
            mark(&w->keyless, index);
        }
    }
    else {
        p += (long long)(raw >> 1);
    }
    STEP(varint(d, n, &p, 5, &raw, fault));  /* value length */
    if (!(raw & 1)) {
        p += (long long)(raw >> 1);
    }
    else if (raw != 1) {
        fault->kind = F_VALUE_SIZE;
        fault->value = (long long)raw;
        return 2;
    }
    if (p >= n) {
        return 1;
    }
    if (d[p]) {
        STEP(skip_headers(d, n, &p, at + len, fault));
    }
    else {
        p += 1;
    }
    if (p != at + len) {
        fault->kind = F_READ_SIZE;
        fault->value = len;
        fault->extra = p - at;
        return 2;
    }
    w->at = p;
    if (delta > w->largest) {
        w->largest = delta;
    }
    if (w->always_out || delta < w->low || delta > w->high) {
        mark(&w->out_of_range, index);
        mark(&w->out_of_range, delta);
    }
    return 0;
}

/* All records: 0, or the first record's fault in w->fault and w->index. */
static int
walk_all(Walk *w)
{
    for (long long index = 0; index < w->count; index++) {
        long long length = -1;
        int r = walk_one(w, index, &length);
        if (r) {
            w->index = index;
            if (r == 1) {
                w->fault.kind = F_PREMATURE_END;
                w->fault.value = length;
            }
            return r;
        }
    }
    return 0;
}

/* An int argument as int64: the bound of the range check, where a bound beyond int64 either
 * never refuses a delta or always does (`always_out`). */
static int
bound(PyObject *obj, long long *out, int is_low, int *always_out)
{
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow) {
        v = overflow < 0 ? LLONG_MIN : LLONG_MAX;
        if ((overflow > 0) == (is_low != 0)) {
            *always_out = 1;
        }
    }
    *out = v;
    return 0;
}

static PyObject *
results(Walk *w)
{
    if (w->keyless.failed || w->out_of_range.failed) {
        return PyErr_NoMemory();
    }
    PyObject *keyless = PyList_New(w->keyless.size);
    PyObject *out = PyList_New(w->out_of_range.size / 2);
    if (keyless == NULL || out == NULL) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < w->keyless.size; i++) {
        PyObject *index = PyLong_FromLongLong(w->keyless.items[i]);
        if (index == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(keyless, i, index);
    }
    for (Py_ssize_t i = 0; i < w->out_of_range.size / 2; i++) {
        PyObject *pair = Py_BuildValue(
            "(LL)", w->out_of_range.items[2 * i], w->out_of_range.items[2 * i + 1]);
        if (pair == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(out, i, pair);
    }
    return Py_BuildValue("(LLNN)", w->at, w->largest, keyless, out);
fail:
    Py_XDECREF(keyless);
    Py_XDECREF(out);
    return NULL;
}

static PyObject *
walk(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "walk(data, start, end, count, require_key, low, high)");
        return NULL;
    }
    Walk w;
    memset(&w, 0, sizeof(w));
    long long start = PyLong_AsLongLong(args[1]);
    w.end = PyLong_AsLongLong(args[2]);
    w.count = PyLong_AsLongLong(args[3]);
    w.require_key = PyObject_IsTrue(args[4]);
    if (PyErr_Occurred() || bound(args[5], &w.low, 1, &w.always_out) < 0
        || bound(args[6], &w.high, 0, &w.always_out) < 0) {
        return NULL;
    }
    /* positions from a batch header (int32 lengths): far inside int64, so no sum overflows */
    if (start < 0 || start > POSITION_LIMIT || w.end < -POSITION_LIMIT || w.end > POSITION_LIMIT) {
        PyErr_SetString(PyExc_ValueError, "start must be in [0, 2**62], end in [-2**62, 2**62]");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    w.d = (const uint8_t *)view.buf;
    w.n = (long long)view.len;
    w.at = start;
    w.largest = LLONG_MIN;
    int r;
    if (w.end - start >= NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        r = walk_all(&w);
        Py_END_ALLOW_THREADS
    }
    else {
        r = walk_all(&w);
    }
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (r) {
        PyObject *fault = Py_BuildValue("(LiLL)", w.index, w.fault.kind, w.fault.value,
                                        w.fault.extra);
        if (fault != NULL) {
            PyErr_SetObject(RecordFault, fault);
            Py_DECREF(fault);
        }
    }
    else {
        result = results(&w);
    }
    free(w.keyless.items);
    free(w.out_of_range.items);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL,
     "walk(data, start, end, count, require_key, low, high): record_walk._walk's loop."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "kafkapy.protocol._record_walk",
    "The per-record loop of kafkapy.protocol.record_walk in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__record_walk(void)
{
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    RecordFault = PyErr_NewException("kafkapy.protocol._record_walk.RecordFault", NULL, NULL);
    if (RecordFault == NULL || PyModule_AddObjectRef(module, "RecordFault", RecordFault) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
