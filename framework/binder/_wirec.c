/* The two frames of every binder call, cut and made in C: framework.binder._wirec.
 *
 * _wire.py is the protocol and stays its one definition: this module only does, in
 * one C call instead of some hundred bytecodes, what _wire.Connection's shortcuts
 * (receive, send_call, send_reply) do for a call's frame when nothing about it is
 * unusual. Every function here either does that exactly or answers None, and the
 * caller then goes the general way in Python, which does it or says what is wrong.
 * So nothing here raises a protocol error, decides one, or formats one: a frame it
 * does not take is not refused by it (tests/test_binder_wire.py checks the two ways
 * against each other). It never keeps a reference to what it reads.
 *
 * Two more helpers live here for the same reason: decode_fields and init_fields, which
 * the generated code of a parcelable of plain fields tries first (each answers None or
 * False for anything its Python would have to convert or refuse), and recvmsg, the
 * transport's one read of a socket with its descriptors.
 *
 * The frames (see _wire's docstring), big-endian after a u32 length prefix:
 *   Transaction: kind 3 (u8), oneway (u8), nfds (u16), code (u32), txn_id (i64),
 *                target (i64), then the parcel in msgpack;
 *   OK Reply:    kind 4 (u8), 0 (u8), nfds (u16), txn_id (i64), then the parcel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TXN_FRAME 28 /* length prefix and header */
#define OK_FRAME 16
#define MAX_FDS 253

/* Set once by configure(), from _wire, which owns them. */
static PyObject *unpackb;          /* msgpack.unpackb */
/* Its keyword arguments as a vectorcall's names and values after the body: a
 * Cython function takes them as they are, where a dict is unpacked on every call. */
static PyObject *unpack_kwnames;   /* a tuple of str */
static PyObject *unpack_kwvalues;  /* a tuple, which holds what unpack_argv points to */
static PyObject **unpack_argv;     /* [body, value...]: slot 0 is each call's body */
static PyObject *transaction_type; /* _wire.Transaction */
static PyObject *reply_type;       /* _wire.Reply */
static Py_ssize_t max_whole;       /* the longest frame, prefix included */
static Py_ssize_t max_body;        /* the longest parcel */
static PyObject *zero, *empty_str, *empty_tuple;

static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int64_t get64(const unsigned char *p)
{
    uint64_t v = (uint64_t)get32(p) << 32 | get32(p + 4);
    return (int64_t)v;
}

static void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)(v >> 8); p[1] = (unsigned char)v; }

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static void put64(unsigned char *p, int64_t v)
{
    put32(p, (uint32_t)((uint64_t)v >> 32));
    put32(p + 4, (uint32_t)v);
}

static int configured(void)
{
    if (unpackb == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "framework.binder._wirec is not configured");
        return 0;
    }
    return 1;
}

/* The module is configured and a function that takes `want` arguments got them. */
static int ready(Py_ssize_t nargs, Py_ssize_t want, const char *name)
{
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments, got %zd", name, want, nargs);
        return 0;
    }
    return configured();
}

/* None when an Exception is pending (the general way will meet it again and say
 * what it is); NULL, passing it on, when it is not one (KeyboardInterrupt...). */
static PyObject *none_unless_fatal(void)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return NULL;
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* The parcel after a header of `head` bytes, decoded as _Framer.next decodes it;
 * NULL with an exception set if it is not msgpack. */
static PyObject *decode_parcel(const unsigned char *p, Py_ssize_t n, Py_ssize_t head)
{
    PyObject *body = PyBytes_FromStringAndSize((const char *)p + head, n - head);
    if (body == NULL)
        return NULL;
    unpack_argv[0] = body;
    PyObject *parcel = PyObject_Vectorcall(unpackb, unpack_argv, 1, unpack_kwnames);
    unpack_argv[0] = NULL;
    Py_DECREF(body);
    return parcel;
}

/* The id `txn_id`, if whether `pending` holds it is `want` (1 or 0; -1: either), and
 * the parcel after `head` bytes, if it decodes: 1, with *id and *parcel new
 * references; 0 if not (the caller answers None); -1 on an error to pass on. */
static int id_and_parcel(const unsigned char *p, Py_ssize_t n, Py_ssize_t head, int64_t txn_id, PyObject *pending,
                         int want, PyObject **id, PyObject **parcel)
{
    *id = PyLong_FromLongLong(txn_id);
    if (*id == NULL)
        return -1;
    if (want >= 0) {
        int in_flight = PySet_Contains(pending, *id);
        if (in_flight != want) {
            Py_CLEAR(*id);
            return in_flight < 0 ? -1 : 0;
        }
    }
    *parcel = decode_parcel(p, n, head);
    if (*parcel == NULL) {
        Py_CLEAR(*id);
        PyObject *none = none_unless_fatal();
        Py_XDECREF(none);
        return none == NULL ? -1 : 0;
    }
    return 1;
}

/* tuple.__new__(cls, items): an event made of fields known good, as _wire does. */
static PyObject *make_event(PyObject *cls, PyObject *items)
{
    if (items == NULL)
        return NULL;
    PyObject *args = PyTuple_Pack(1, items);
    Py_DECREF(items);
    if (args == NULL)
        return NULL;
    PyObject *event = PyTuple_Type.tp_new((PyTypeObject *)cls, args, NULL);
    Py_DECREF(args);
    return event;
}

/* Whether args[0] is bytes, exactly one whole frame of `kind` with a header of
 * `head` bytes and a parcel after it, its bytes in *p and *n: 1 if so, 0 if not
 * (answer None), -1 if the arguments are not (data, set). */
static int whole_frame(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t head, unsigned char kind,
                       const unsigned char **p, Py_ssize_t *n)
{
    if (!ready(nargs, 2, "taking a frame"))
        return -1;
    if (!PySet_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "expected (data, set)");
        return -1;
    }
    if (!PyBytes_CheckExact(args[0]))
        return 0; /* bytes only: anything else goes the general way */
    *p = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    *n = PyBytes_GET_SIZE(args[0]);
    return *n > head && *n <= max_whole && (Py_ssize_t)get32(*p) + 4 == *n && (*p)[4] == kind;
}

/* take_transaction(data, pending): the Transaction that `data` is, if it is exactly
 * one whole Transaction frame with no descriptors whose fields are all good and whose
 * id (two-way) is not in `pending`, which it then joins; else None. */
static PyObject *take_transaction(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    const unsigned char *p;
    Py_ssize_t n;
    int is = whole_frame(args, nargs, TXN_FRAME, 3, &p, &n);
    if (is <= 0)
        return is < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *pending = args[1];
    int oneway = p[5];
    uint32_t code = get32(p + 8);
    int64_t txn_id = get64(p + 12), target = get64(p + 20);
    if (oneway > 1 || get16(p + 6) != 0 || txn_id < 0 || target < 0)
        Py_RETURN_NONE;
    PyObject *id, *parcel;
    int got = id_and_parcel(p, n, TXN_FRAME, txn_id, pending, oneway ? -1 : 0, &id, &parcel);
    if (got <= 0)
        return got < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *items = Py_BuildValue("(NNNONOO)", id, PyLong_FromLongLong(target), PyLong_FromUnsignedLong(code),
                                    oneway ? Py_True : Py_False, parcel, zero, empty_tuple);
    PyObject *event = make_event(transaction_type, items);
    if (event != NULL && !oneway && PySet_Add(pending, PyTuple_GET_ITEM(event, 0)) < 0)
        Py_CLEAR(event);
    return event;
}

/* take_reply(data, pending): the successful Reply that `data` is, if it is exactly
 * one whole such frame with no descriptors, answering an id in `pending`, which then
 * leaves it; else None. */
static PyObject *take_reply(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    const unsigned char *p;
    Py_ssize_t n;
    int is = whole_frame(args, nargs, OK_FRAME, 4, &p, &n);
    if (is <= 0)
        return is < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *pending = args[1];
    if (p[5] != 0 || get16(p + 6) != 0)
        Py_RETURN_NONE;
    int64_t txn_id = get64(p + 8);
    if (txn_id < 0)
        Py_RETURN_NONE;
    PyObject *id, *parcel;
    int got = id_and_parcel(p, n, OK_FRAME, txn_id, pending, 1, &id, &parcel);
    if (got <= 0)
        return got < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *items = Py_BuildValue("(NOOOONOO)", id, zero, zero, empty_str, zero, parcel, zero, empty_tuple);
    if (items == NULL)
        return NULL;
    if (PySet_Discard(pending, PyTuple_GET_ITEM(items, 0)) < 0) {
        Py_DECREF(items);
        return NULL;
    }
    return make_event(reply_type, items);
}

/* An exact int in [lo, hi], read into *out; 0 if it is anything else. */
static int int_in(PyObject *v, long long lo, long long hi, long long *out)
{
    if (!PyLong_CheckExact(v))
        return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (x < lo || x > hi)
        return 0;
    *out = x;
    return 1;
}

/* A frame of `head` bytes of prefix and header, then `data` packed by `pack`: its
 * length prefix written, its kind byte and the rest of the header the caller's to
 * write. None (a new reference) if the parcel does not pack to bytes of at most
 * max_body; NULL if an error that is not an Exception is to be passed on. */
static PyObject *frame_of(PyObject *pack, PyObject *data, Py_ssize_t head)
{
    PyObject *body = PyObject_Vectorcall(pack, &data, 1, NULL);
    if (body == NULL)
        return none_unless_fatal();
    if (!PyBytes_CheckExact(body) || PyBytes_GET_SIZE(body) > max_body) {
        Py_DECREF(body);
        Py_RETURN_NONE;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(body);
    PyObject *frame = PyBytes_FromStringAndSize(NULL, head + size);
    if (frame != NULL) {
        unsigned char *p = (unsigned char *)PyBytes_AS_STRING(frame);
        put32(p, (uint32_t)(head - 4 + size));
        memcpy(p + head, PyBytes_AS_STRING(body), (size_t)size);
    }
    Py_DECREF(body);
    return frame;
}

/* frame_call(pack, target, code, oneway, nfds, txn_id, data): a Transaction's whole
 * frame (prefix, header, parcel) as one bytes, if every field is good and the parcel
 * packs within the limit; else None. */
static PyObject *frame_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (!ready(nargs, 7, "frame_call"))
        return NULL;
    long long target, code, nfds, txn_id;
    PyObject *oneway = args[3];
    if (!int_in(args[1], 0, INT64_MAX, &target) || !int_in(args[2], 0, UINT32_MAX, &code) ||
        (oneway != Py_True && oneway != Py_False) || !int_in(args[4], 0, MAX_FDS, &nfds) ||
        !int_in(args[5], 0, INT64_MAX, &txn_id))
        Py_RETURN_NONE;
    PyObject *frame = frame_of(args[0], args[6], TXN_FRAME);
    if (frame != NULL && frame != Py_None) {
        unsigned char *p = (unsigned char *)PyBytes_AS_STRING(frame);
        p[4] = 3;
        p[5] = oneway == Py_True;
        put16(p + 6, (uint16_t)nfds);
        put32(p + 8, (uint32_t)code);
        put64(p + 12, txn_id);
        put64(p + 20, target);
    }
    return frame;
}

/* frame_reply(pack, txn_id, nfds, data): a successful Reply's whole frame as one
 * bytes, if the fields are good and the parcel packs within the limit; else None. */
static PyObject *frame_reply(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (!ready(nargs, 4, "frame_reply"))
        return NULL;
    long long txn_id, nfds;
    if (!int_in(args[1], 0, INT64_MAX, &txn_id) || !int_in(args[2], 0, MAX_FDS, &nfds))
        Py_RETURN_NONE;
    PyObject *frame = frame_of(args[0], args[3], OK_FRAME);
    if (frame != NULL && frame != Py_None) {
        unsigned char *p = (unsigned char *)PyBytes_AS_STRING(frame);
        p[4] = 4;
        p[5] = 0;
        put16(p + 6, (uint16_t)nfds);
        put64(p + 8, txn_id);
    }
    return frame;
}

/* ---------------------------------------------------------------------------------
 * A parcelable's fields, decoded in C when each is already what the generated
 * Python's inline test would accept (aidlc's decode_src): the same tests, then
 * object.__new__ and the slots set through their member descriptors. Anything else
 * (a field to convert, a DEFAULT, the wrong length) answers None, and the generated
 * Python decodes it or says what is wrong, as before.
 *
 * Each field's kind is a tuple: (FIELD_INT, lo, hi), (FIELD_BOOL,), (FIELD_FLOAT,),
 * (FIELD_STR,), (FIELD_BYTES, size or -1); FIELD_NULLABLE or-ed in lets None pass.
 */
enum {
    FIELD_INT = 1, FIELD_BOOL = 2, FIELD_FLOAT = 3, FIELD_STR = 4, FIELD_BYTES = 5,
    FIELD_ASCII = 6, /* a str of ASCII only: what __init__ takes as it is (no lone surrogate) */
    FIELD_NULLABLE = 0x100,
};

/* Whether `v` is what a field of `kind` takes as it is: 1, 0, or -1 on a bad kind. */
static int field_ok(PyObject *v, PyObject *kind)
{
    if (!PyTuple_CheckExact(kind) || PyTuple_GET_SIZE(kind) < 1 || !PyLong_CheckExact(PyTuple_GET_ITEM(kind, 0)))
        return -1;
    long code = PyLong_AsLong(PyTuple_GET_ITEM(kind, 0));
    if (v == Py_None)
        return (code & FIELD_NULLABLE) != 0;
    Py_ssize_t nargs = PyTuple_GET_SIZE(kind);
    switch (code & ~FIELD_NULLABLE) {
    case FIELD_INT: {
        if (nargs != 3)
            return -1;
        if (!PyLong_CheckExact(v))
            return 0;
        /* lo <= v <= hi, compared as Python ints (a long's bounds are 64-bit). */
        int ge = PyObject_RichCompareBool(v, PyTuple_GET_ITEM(kind, 1), Py_GE);
        if (ge <= 0)
            return ge < 0 ? -1 : 0;
        return PyObject_RichCompareBool(v, PyTuple_GET_ITEM(kind, 2), Py_LE);
    }
    case FIELD_BOOL:
        return v == Py_True || v == Py_False;
    case FIELD_FLOAT:
        return PyFloat_CheckExact(v);
    case FIELD_STR:
        return PyUnicode_CheckExact(v);
    case FIELD_ASCII:
        return PyUnicode_CheckExact(v) && PyUnicode_IS_ASCII(v);
    case FIELD_BYTES: {
        if (nargs != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(kind, 1)))
            return -1;
        if (!PyBytes_CheckExact(v))
            return 0;
        Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(kind, 1));
        return size < 0 || PyBytes_GET_SIZE(v) == size;
    }
    default:
        return -1;
    }
}

/* Set each of `slots` (member descriptors) of `self` to the item of `values`. */
static int set_slots(PyObject *self, PyObject *slots, PyObject *const *values)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(slots); i++) {
        PyObject *slot = PyTuple_GET_ITEM(slots, i);
        descrsetfunc set = Py_TYPE(slot)->tp_descr_set;
        /* A slot must be a member descriptor with a setter (of self's class, which
         * the setter checks), as bind makes them. */
        if (Py_TYPE(slot) != &PyMemberDescr_Type || set == NULL || set(slot, self, values[i]) < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "slot %zd is not a member descriptor", i);
            return -1;
        }
    }
    return 0;
}

/* Whether each of `values` (n of them) is what its kind takes as it is: 1, 0, -1. */
static int fields_ok(PyObject *kinds, PyObject *const *values, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        int ok = field_ok(values[i], PyTuple_GET_ITEM(kinds, i));
        if (ok < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "kind %zd is not a field kind", i);
            return -1;
        }
        if (!ok)
            return 0;
    }
    return 1;
}

/* init_fields(self, slots, kinds, values): set the slots of `self` to `values` (a
 * tuple, one per slot) and answer True, if each is what its kind takes as it is;
 * else change nothing and answer False. What a generated __init__ tries first. */
static PyObject *init_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4 || !PyTuple_CheckExact(args[1]) || !PyTuple_CheckExact(args[2]) || !PyTuple_CheckExact(args[3]) ||
        PyTuple_GET_SIZE(args[1]) != PyTuple_GET_SIZE(args[2]) || PyTuple_GET_SIZE(args[1]) != PyTuple_GET_SIZE(args[3])) {
        PyErr_SetString(PyExc_TypeError, "init_fields(self, slots, kinds, values): one kind and value per slot");
        return NULL;
    }
    PyObject *values = args[3];
    int ok = fields_ok(args[2], &PyTuple_GET_ITEM(values, 0), PyTuple_GET_SIZE(values));
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_False);
    if (set_slots(args[0], args[1], &PyTuple_GET_ITEM(values, 0)) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

/* decode_fields(cls, slots, kinds, data): a new `cls` with its slots (member
 * descriptors, in declared order) set to the items of list `data`, if `data` has one
 * item per slot and each is what its kind (see above) takes as it is; else None. */
static PyObject *decode_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4 || !PyType_Check(args[0]) || !PyTuple_CheckExact(args[1]) || !PyTuple_CheckExact(args[2]) ||
        PyTuple_GET_SIZE(args[1]) != PyTuple_GET_SIZE(args[2])) {
        PyErr_SetString(PyExc_TypeError, "decode_fields(cls, slots, kinds, data): slots and kinds one per field");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    PyObject *slots = args[1], *kinds = args[2], *data = args[3];
    Py_ssize_t n = PyTuple_GET_SIZE(slots);
    if (!PyList_CheckExact(data) || PyList_GET_SIZE(data) != n)
        Py_RETURN_NONE;
    int ok = fields_ok(kinds, &PyList_GET_ITEM(data, 0), n);
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    /* Nothing above ran Python code: the list is as it was tested. */
    PyObject *self = PyBaseObject_Type.tp_new(cls, empty_tuple, NULL);
    if (self != NULL && set_slots(self, slots, &PyList_GET_ITEM(data, 0)) < 0)
        Py_CLEAR(self);
    return self;
}

/* ---------------------------------------------------------------------------------
 * One read of a stream socket, for _transport: what sock.recvmsg_into with room for
 * MAX_FDS descriptors, a slice of the buffer and the ancillary data walked in
 * Python did, in one call.
 */

/* recvmsg(fd, buffer): one recvmsg of at most len(buffer) bytes into the writable
 * `buffer` (non-blocking: BlockingIOError if nothing is there; OSError as the
 * syscall says, retried on EINTR as Python does): (data, fds, truncated), the
 * bytes read (b"" at end of stream), the descriptors that came with them (a list;
 * the caller owns them) and whether more descriptors came than fit
 * (MSG_CTRUNC: the kernel closed the rest). */
static PyObject *recvmsg_fds(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyLong_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "recvmsg(fd, buffer)");
        return NULL;
    }
    long fd = PyLong_AsLong(args[0]);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (fd < 0 || fd > INT32_MAX) {
        errno = EBADF; /* what a closed socket's fileno() of -1 would get */
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_WRITABLE | PyBUF_SIMPLE) < 0)
        return NULL;
    union {
        char space[CMSG_SPACE(MAX_FDS * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct iovec iov = {view.buf, (size_t)view.len};
    struct msghdr msg;
    ssize_t n;
    for (;;) {
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.space;
        msg.msg_controllen = sizeof control.space;
        n = recvmsg((int)fd, &msg, 0);
        if (n >= 0 || errno != EINTR)
            break;
        if (PyErr_CheckSignals() < 0) {
            PyBuffer_Release(&view);
            return NULL;
        }
    }
    if (n < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *fds = NULL;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const unsigned char *at = CMSG_DATA(c);
        for (size_t i = 0; i < count; i++) {
            int got;
            memcpy(&got, at + i * sizeof(int), sizeof got);
            PyObject *item = PyLong_FromLong(got);
            if (fds == NULL && item != NULL)
                fds = PyList_New(0);
            if (item == NULL || fds == NULL || PyList_Append(fds, item) < 0) {
                /* Out of memory: these descriptors are ours, and nobody else will close them. */
                Py_XDECREF(item);
                for (size_t j = i; j < count; j++) {
                    memcpy(&got, at + j * sizeof(int), sizeof got);
                    close(got);
                }
                Py_XDECREF(fds);
                PyBuffer_Release(&view);
                return NULL;
            }
            Py_DECREF(item);
        }
    }
    PyObject *data = PyBytes_FromStringAndSize(view.buf, n);
    PyBuffer_Release(&view);
    if (data == NULL) {
        Py_XDECREF(fds);
        return NULL;
    }
    if (fds == NULL && (fds = PyList_New(0)) == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    return Py_BuildValue("(NNO)", data, fds,
                         (msg.msg_flags & MSG_CTRUNC) ? Py_True : Py_False);
}

/* configure(unpackb, kwargs, Transaction, Reply, max_frame_size, max_parcel_size) */
static PyObject *configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6 || !PyCallable_Check(args[0]) || !PyDict_CheckExact(args[1]) || !PyType_Check(args[2]) ||
        !PyType_Check(args[3]) || !PyType_IsSubtype((PyTypeObject *)args[2], &PyTuple_Type) ||
        !PyType_IsSubtype((PyTypeObject *)args[3], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "configure(unpackb, kwargs, Transaction, Reply, max_frame_size, max_parcel_size)");
        return NULL;
    }
    Py_ssize_t frame = PyLong_AsSsize_t(args[4]), parcel = PyLong_AsSsize_t(args[5]);
    if ((frame == -1 || parcel == -1) && PyErr_Occurred())
        return NULL;
    if (frame <= 0 || parcel <= 0 || frame > PY_SSIZE_T_MAX - 4) {
        PyErr_SetString(PyExc_ValueError, "sizes must be positive");
        return NULL;
    }
    Py_ssize_t nkw = PyDict_GET_SIZE(args[1]);
    PyObject *kwnames = PyTuple_New(nkw), *kwvalues = PyTuple_New(nkw);
    PyObject **argv = PyMem_Calloc((size_t)nkw + 1, sizeof(PyObject *));
    if (kwnames == NULL || kwvalues == NULL || argv == NULL) {
        Py_XDECREF(kwnames);
        Py_XDECREF(kwvalues);
        PyMem_Free(argv);
        return PyErr_NoMemory();
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0, i = 0;
    while (PyDict_Next(args[1], &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            Py_DECREF(kwnames);
            Py_DECREF(kwvalues);
            PyMem_Free(argv);
            PyErr_SetString(PyExc_TypeError, "unpackb's keyword arguments must be named by str");
            return NULL;
        }
        PyTuple_SET_ITEM(kwnames, i, Py_NewRef(key));
        PyTuple_SET_ITEM(kwvalues, i, Py_NewRef(value));
        argv[++i] = value;
    }
    Py_XSETREF(unpackb, Py_NewRef(args[0]));
    Py_XSETREF(unpack_kwnames, kwnames);
    Py_XSETREF(unpack_kwvalues, kwvalues);
    PyMem_Free(unpack_argv);
    unpack_argv = argv;
    Py_XSETREF(transaction_type, Py_NewRef(args[2]));
    Py_XSETREF(reply_type, Py_NewRef(args[3]));
    max_whole = frame + 4;
    max_body = parcel;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"take_transaction", (PyCFunction)(void (*)(void))take_transaction, METH_FASTCALL,
     "take_transaction(data, pending): the Transaction that data is whole, or None."},
    {"take_reply", (PyCFunction)(void (*)(void))take_reply, METH_FASTCALL,
     "take_reply(data, pending): the successful Reply that data is whole, or None."},
    {"frame_call", (PyCFunction)(void (*)(void))frame_call, METH_FASTCALL,
     "frame_call(pack, target, code, oneway, nfds, txn_id, data): a Transaction's frame, or None."},
    {"frame_reply", (PyCFunction)(void (*)(void))frame_reply, METH_FASTCALL,
     "frame_reply(pack, txn_id, nfds, data): a successful Reply's frame, or None."},
    {"decode_fields", (PyCFunction)(void (*)(void))decode_fields, METH_FASTCALL,
     "decode_fields(cls, slots, kinds, data): a new cls with its slots set from data, or None."},
    {"init_fields", (PyCFunction)(void (*)(void))init_fields, METH_FASTCALL,
     "init_fields(self, slots, kinds, values): set the slots to values and answer True, or answer False."},
    {"recvmsg", (PyCFunction)(void (*)(void))recvmsg_fds, METH_FASTCALL,
     "recvmsg(fd, buffer): one read into buffer: (data, fds, truncated)."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(unpackb, kwargs, Transaction, Reply, max_frame_size, max_parcel_size)"},
    {NULL, NULL, 0, NULL},
};

/* What _wire expects: a build of another version fails its import, loudly. */
#define WIREC_VERSION 2

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "framework.binder._wirec",
    "A binder call's two frames, cut and made in C for _wire (which see).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__wirec(void)
{
    zero = PyLong_FromLong(0);
    empty_str = PyUnicode_FromString("");
    empty_tuple = PyTuple_New(0);
    if (zero == NULL || empty_str == NULL || empty_tuple == NULL)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module != NULL && (PyModule_AddIntConstant(module, "VERSION", WIREC_VERSION) < 0 ||
                           PyModule_AddIntConstant(module, "FIELD_INT", FIELD_INT) < 0 ||
                           PyModule_AddIntConstant(module, "FIELD_BOOL", FIELD_BOOL) < 0 ||
                           PyModule_AddIntConstant(module, "FIELD_FLOAT", FIELD_FLOAT) < 0 ||
                           PyModule_AddIntConstant(module, "FIELD_STR", FIELD_STR) < 0 ||
                           PyModule_AddIntConstant(module, "FIELD_BYTES", FIELD_BYTES) < 0 ||
                           PyModule_AddIntConstant(module, "FIELD_ASCII", FIELD_ASCII) < 0 ||
                           PyModule_AddIntConstant(module, "FIELD_NULLABLE", FIELD_NULLABLE) < 0))
        Py_CLEAR(module);
    return module;
}
