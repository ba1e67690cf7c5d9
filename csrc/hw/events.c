/*
 * The event ring.  The eventfd's counter is touched only under the ring's
 * lock, together with the FIFO, so "readable" and "not empty" can never
 * disagree: a push after a drain's last read re-arms the fd.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "npu/errors.h"
#include "hw_internal.h"

/* 65536 events are about 13 MB: a stalled reader costs memory, bounded well
 * inside the HAL's RSS budget. */
enum { RING_INITIAL = 256, RING_MAX = 1 << 16 };

int npu_ring_init(struct npu_ring *r)
{
    memset(r, 0, sizeof *r);
    r->buf = malloc(RING_INITIAL * sizeof *r->buf);
    if (!r->buf)
        return NPU_E_NO_MEMORY;
    r->cap = RING_INITIAL;
    r->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->fd < 0) {
        free(r->buf);
        return NPU_E_SYSTEM_ERROR;
    }
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        close(r->fd);
        free(r->buf);
        return NPU_E_SYSTEM_ERROR;
    }
    return NPU_OK;
}

void npu_ring_fini(struct npu_ring *r)
{
    pthread_mutex_destroy(&r->lock);
    close(r->fd);
    free(r->buf);
}

void npu_ring_push(struct npu_ring *r, const struct npu_event *ev)
{
    pthread_mutex_lock(&r->lock);
    if (r->count == r->cap) {
        size_t ncap = r->cap * 2;
        struct npu_event *nb = ncap <= RING_MAX ? malloc(ncap * sizeof *nb) : NULL;
        if (!nb) {
            /* Better to count a loss than to block the hardware: the
             * system's dump reports the number. */
            r->dropped++;
            pthread_mutex_unlock(&r->lock);
            return;
        }
        for (size_t i = 0; i < r->count; i++)
            nb[i] = r->buf[(r->head + i) % r->cap];
        free(r->buf);
        r->buf = nb;
        r->cap = ncap;
        r->head = 0;
    }
    r->buf[(r->head + r->count) % r->cap] = *ev;
    r->count++;
    uint64_t one = 1;
    /* EAGAIN only if the counter would overflow, which still leaves it readable */
    ssize_t w = write(r->fd, &one, sizeof one);
    (void)w;
    pthread_mutex_unlock(&r->lock);
}

uint32_t npu_ring_drain(struct npu_ring *r, struct npu_event *out, uint32_t max)
{
    pthread_mutex_lock(&r->lock);
    uint32_t n = 0;
    while (n < max && r->count > 0) {
        out[n++] = r->buf[r->head];
        r->head = (r->head + 1) % r->cap;
        r->count--;
    }
    if (r->count == 0) {
        uint64_t v;
        ssize_t rd = read(r->fd, &v, sizeof v);
        (void)rd;
    }
    pthread_mutex_unlock(&r->lock);
    return n;
}

uint64_t npu_ring_dropped(struct npu_ring *r)
{
    pthread_mutex_lock(&r->lock);
    uint64_t d = r->dropped;
    pthread_mutex_unlock(&r->lock);
    return d;
}
