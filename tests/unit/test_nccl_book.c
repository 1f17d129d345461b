/* The NCCL layer's host-side bookkeeping (runtime/nccl/nccl_book.c), which needs no GPU: batches
 * of a turn's operations go open -> closed -> waited -> started -> done -> collected in posting
 * order; a batch expires only once waited for and started, timeout seconds after it started, and
 * the first of its operations is the one named; the trace sees every operation once with its
 * batch's completion time; slots are reused; a group whose issue hangs (NCCL connecting to a
 * peer) expires from when the issue began. (Groups and the names of operations are every layer's:
 * test_comm_book.c.) */
#include <string.h>
#include "check.h"
#include "nccl/nccl_book.h"

typedef struct Seen { int n; CommEvent ev[16]; char labels[16][48]; } Seen;

static void record(void *ud, const CommEvent *e) {
    Seen *s = ud;
    if (s->n < 16) {
        s->ev[s->n] = *e;
        snprintf(s->labels[s->n], 48, "%s", e->label);
    }
    s->n++;
}

static void test_batches(void) {
    NcclBook b;
    nb_init(&b, 1, 4, 10.0);
    CHECK(nb_close(&b) == -1, "nothing open to close");
    int s1 = nb_post(&b, COMM_RECV, &(CommInfo){ 5, "W3" }, 0, -1, 1024, 1.0);
    int s1b = nb_post(&b, COMM_SEND, &(CommInfo){ 5, "D2" }, 2, -1, 512, 1.1);
    CHECK(s1 >= 0 && s1 == s1b, "one turn's operations share a batch: %d %d", s1, s1b);
    CHECK(nb_close(&b) == s1, "close returns the batch");
    int s2 = nb_post(&b, COMM_ALLREDUCE, &(CommInfo){ 6, "D0" }, -1, -1, 4096, 2.0);
    CHECK(s2 >= 0 && s2 != s1, "the next turn opens a new batch: %d", s2);
    nb_close(&b);
    CHECK(nb_in_flight(&b) == 2, "two batches in flight: %d", nb_in_flight(&b));

    /* not waited for: never expires, however old */
    nb_started(&b, s1, 3.0);
    CHECK(nb_expired(&b, 1e9) == -1, "a batch nobody waits for yet does not expire");
    nb_waited(&b, 3.0);
    CHECK(b.batches[s1].state == NB_WAITED && b.batches[s2].state == NB_WAITED, "both waited");
    CHECK(nb_expired(&b, 1e9) == -1, "waited but not started: the peer may not have reached it; no expiry");
    nb_started(&b, s1, 4.0);
    nb_started(&b, s2, 5.0);
    CHECK(nb_expired(&b, 13.9) == -1, "9.9 s after the start of the oldest: not expired");
    CHECK(nb_expired(&b, 14.5) == s1, "10.5 s after: the oldest expired");
    int first = nb_first_op(&b, s1);
    CHECK(first == 0 && b.ops[first].op.kind == COMM_RECV, "the batch's first operation is named: %d", first);
    char d[256];
    cb_op_desc(&b.groups, &b.ops[first].op, d, sizeof d);
    CHECK(!strcmp(d, "RECV \"W3\" from rank 0 in turn 5 (1024 bytes)"), "named: %s", d);

    /* the older one done: the younger one is now the oldest pending */
    nb_done(&b, s1, 6.0);
    CHECK(nb_expired(&b, 14.5) == -1, "done batches do not expire; s2 started at 5");
    CHECK(nb_expired(&b, 15.5) == s2, "s2 expires 10 s after its start");
    Seen seen = { 0 };
    CHECK(nb_collect(&b, record, &seen) == 2 && seen.n == 2, "the done batch's two operations reported: %d", seen.n);
    CHECK(seen.ev[0].kind == COMM_RECV && seen.ev[1].kind == COMM_SEND, "in posting order");
    CHECK(!strcmp(seen.labels[0], "W3") && seen.ev[0].turn == 5 && seen.ev[0].peer == 0 && seen.ev[0].bytes == 1024,
          "the event carries the operation: %s %d", seen.labels[0], seen.ev[0].turn);
    CHECK(seen.ev[0].t_post == 1.0 && seen.ev[1].t_done == 6.0, "posted at its time, done at the batch's end event");
    CHECK(b.nops == 1 && nb_in_flight(&b) == 1, "the collected batch is forgotten: %d ops, %d batches", b.nops, nb_in_flight(&b));
    CHECK(nb_collect(&b, record, &seen) == 0, "nothing more is done");
    /* its slot is reused */
    int s3 = nb_post(&b, COMM_BCAST, &(CommInfo){ 7, "W1" }, 0, -1, 8, 7.0);
    CHECK(s3 == s1, "the free slot is reused: %d", s3);
    nb_close(&b);
    nb_done(&b, s2, 8.0);
    nb_waited(&b, 8.0);
    nb_started(&b, s3, 8.0);
    nb_done(&b, s3, 9.0);
    seen.n = 0;
    CHECK(nb_collect(&b, record, &seen) == 2 && seen.ev[0].kind == COMM_ALLREDUCE && seen.ev[1].kind == COMM_BCAST,
          "both reported, oldest first");
    CHECK(b.nops == 0 && nb_in_flight(&b) == 0, "the book is empty");
    nb_free(&b);

    /* a group the host is still issuing (ncclGroupEnd waiting for a peer to connect) times out
     * from when the issue began, waited for or not; once issued it is an ordinary closed batch */
    nb_init(&b, 0, 2, 5.0);
    int si = nb_post(&b, COMM_RECV, &(CommInfo){ 3, "A1" }, 1, -1, 64, 0.0);
    nb_close(&b);
    nb_issuing(&b, si, 1.0);
    CHECK(nb_expired(&b, 5.9) == -1, "issuing for 4.9 s: not expired");
    CHECK(nb_expired(&b, 6.5) == si && nb_age(&b, si, 6.5) == 5.5, "issuing for 5.5 s: expired, aged %g", nb_age(&b, si, 6.5));
    nb_issued(&b, si);
    CHECK(nb_expired(&b, 100) == -1, "issued, not waited for: no expiry");
    nb_free(&b);

    /* timeout 0: nothing expires */
    nb_init(&b, 0, 2, 0);
    int s = nb_post(&b, COMM_SEND, NULL, 1, -1, 4, 0);
    nb_close(&b);
    nb_waited(&b, 0);
    nb_started(&b, s, 0);
    CHECK(nb_expired(&b, 1e12) == -1, "no timeout, no expiry");
    cb_op_desc(&b.groups, &b.ops[0].op, d, sizeof d);
    CHECK(!strcmp(d, "SEND to rank 1 in outside the step (4 bytes)"), "an operation without info: %s", d);
    nb_free(&b);
}

int main(void) {
    test_batches();
    return check_summary("test_nccl_book");
}
