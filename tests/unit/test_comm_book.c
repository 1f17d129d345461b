/* The communication layers' shared bookkeeping (runtime/common/comm_book.c), which both the MPI
 * and the NCCL layer fail through: groups are validated, indexed and described; operations are
 * named with kind, label, peer or group, turn and bytes, and recorded for the trace as posted;
 * a collective's group, root and buffers are checked with the messages both layers print; the
 * timeouts from the environment are read or refused; operations past a piece are cut in order
 * (WP_COMM_MAX_ELEMS read or refused). */
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include "check.h"
#include "common/comm_book.h"

static void test_groups(void) {
    CommGroups t;
    cb_groups_init(&t, 2, 12);
    char err[256];
    CHECK(cb_group_add(&t, (int[]){ 0, 2 }, 2, err, sizeof err) == 0, "first group is 0");
    CHECK(cb_group_add(&t, (int[]){ 1, 3 }, 2, err, sizeof err) == 1, "second is 1");
    CHECK(t.g[0].me == 1 && t.g[1].me == -1, "membership: %d %d", t.g[0].me, t.g[1].me);
    CHECK(cb_group_index(&t, 0, 2) == 1 && cb_group_index(&t, 0, 3) == -1 && cb_group_index(&t, 5, 0) == -1,
          "root index");
    CHECK(cb_group_add(&t, (int[]){ 0, 0 }, 2, err, sizeof err) == -1 && strstr(err, "rank 0 appears twice"), "%s", err);
    CHECK(cb_group_add(&t, (int[]){ 0, 12 }, 2, err, sizeof err) == -1 && strstr(err, "outside the world of 12"), "%s", err);
    CHECK(cb_group_add(&t, (int[]){ 0 }, 0, err, sizeof err) == -1 && strstr(err, "0 members"), "%s", err);
    int all[11] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
    CHECK(cb_group_add(&t, all, 11, err, sizeof err) == 2, "a long group");
    char d[256];
    CHECK(!strcmp(cb_group_desc(&t, 0, d, sizeof d), "group 0 (ranks 0,2)"), "%s", d);
    CHECK(!strcmp(cb_group_desc(&t, 2, d, sizeof d), "group 2 (ranks 0,1,2,3,4,5,6,7,...,10)"), "%s", d);
    CHECK(strlen(cb_group_desc(&t, 2, d, 10)) == 9, "a short buffer is cut, terminated: %s", d);

    CommOp op = cb_op(COMM_REDUCE, NULL, &(CommInfo){ 9, "D1" }, 0, 0, 64, 1.5);
    cb_op_desc(&t, &op, d, sizeof d);
    CHECK(!strcmp(d, "REDUCE \"D1\" to root rank 0 on group 0 (ranks 0,2) in turn 9 (64 bytes)"), "%s", d);
    op = cb_op(COMM_SEND, NULL, NULL, 1, -1, 4, 0);
    cb_op_desc(&t, &op, d, sizeof d);
    CHECK(!strcmp(d, "SEND to rank 1 in outside the step (4 bytes)"), "an operation without info: %s", d);
    op = cb_op(COMM_UTIL, "BARRIER", NULL, -1, -1, 0, 0);
    cb_op_desc(&t, &op, d, sizeof d);
    CHECK(!strcmp(d, "BARRIER in outside the step (0 bytes)"), "a blocking call by its name: %s", d);
    char longer[80];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    op = cb_op(COMM_ALLGATHER, NULL, &(CommInfo){ 3, longer }, -1, 2, 8, 2.0);
    CHECK(strlen(op.label) == 47, "the label is copied, cut to 47 characters: %zu", strlen(op.label));
    CommEvent e = cb_op_event(&op, 2.5);
    CHECK(e.kind == COMM_ALLGATHER && e.turn == 3 && e.group == 2 && e.peer == -1 && e.bytes == 8 && e.t_post == 2.0 &&
          e.t_done == 2.5 && e.label == op.label, "the trace's event carries the operation");
    CommStats s = { 0 };
    cb_count(&s, COMM_SEND, 10);
    cb_count(&s, COMM_SEND, 5);
    CHECK(s.calls[COMM_SEND] == 2 && s.bytes[COMM_SEND] == 15, "counted: %llu %llu",
          (unsigned long long)s.calls[COMM_SEND], (unsigned long long)s.bytes[COMM_SEND]);
    cb_groups_free(&t);
}

static void test_checks(void) {
    CommGroups t;
    cb_groups_init(&t, 1, 4);
    char err[320];
    cb_group_add(&t, (int[]){ 0, 1, 2 }, 3, err, sizeof err);
    cb_group_add(&t, (int[]){ 2, 3 }, 2, err, sizeof err);
    CommInfo ci = { 7, "W2" };
    CHECK(cb_member(&t, COMM_BCAST, 0, &ci, err, sizeof err) == &t.g[0], "a member's group");
    CHECK(!cb_member(&t, COMM_BCAST, 5, &ci, err, sizeof err) &&
          !strcmp(err, "BCAST \"W2\" in turn 7: group 5, but 2 groups are declared"), "%s", err);
    CHECK(!cb_member(&t, COMM_ALLREDUCE, 1, NULL, err, sizeof err) &&
          !strcmp(err, "ALLREDUCE \"\" in turn -1: this rank is not a member of group 1 (ranks 2,3)"), "%s", err);
    CHECK(cb_root(&t, COMM_REDUCE, 0, 2, &ci, err, sizeof err) == 2, "the root's index");
    CHECK(cb_root(&t, COMM_REDUCE, 0, 3, &ci, err, sizeof err) == -1 &&
          !strcmp(err, "REDUCE \"W2\" in turn 7: root rank 3 is not a member of group 0 (ranks 0,1,2)"), "%s", err);
    /* a peer: any rank of the world, this one (1) included: both layers take a send to self */
    CHECK(cb_check_peer(&t, COMM_SEND, 1, &ci, err, sizeof err) == 0 && cb_check_peer(&t, COMM_RECV, 3, &ci, err, sizeof err) == 0,
          "self and the last rank are peers");
    CHECK(cb_check_peer(&t, COMM_SEND, 4, &ci, err, sizeof err) == -1 &&
          !strcmp(err, "SEND \"W2\" in turn 7: peer 4 outside the world of 4 ranks"), "%s", err);
    CHECK(cb_check_peer(&t, COMM_RECV, -1, NULL, err, sizeof err) == -1 &&
          !strcmp(err, "RECV \"\" in turn -1: peer -1 outside the world of 4 ranks"), "%s", err);

    /* shards of 10 elements over 3 members: 3, 3, 4; this rank holds [3, 6) */
    CHECK(comm_shard_offset(10, 3, 1) == 3 && comm_shard_len(10, 3, 1) == 3 && comm_shard_len(10, 3, 2) == 4,
          "shards");
    float full[10], other[3];
    int in_place = -1;
    CHECK(cb_check_allgather(&t.g[0], full + 3, full, 10, 4, &ci, &in_place, err, sizeof err) == 0 && in_place == 1,
          "in place: the shard is its own place");
    CHECK(cb_check_allgather(&t.g[0], other, full, 10, 4, &ci, &in_place, err, sizeof err) == 0 && in_place == 0,
          "apart");
    CHECK(cb_check_allgather(&t.g[0], full + 2, full, 10, 4, &ci, &in_place, err, sizeof err) == -1 &&
          strstr(err, "ALLGATHER \"W2\" in turn 7: the shard overlaps the full buffer but is not its own"), "%s", err);
    CHECK(cb_check_reduce_scatter(&t.g[0], full, other, 10, 4, &ci, err, sizeof err) == 0, "a scatter apart");
    CHECK(cb_check_reduce_scatter(&t.g[0], full, full + 9, 10, 4, &ci, err, sizeof err) == -1 &&
          !strcmp(err, "REDUCE_SCATTER \"W2\" in turn 7: the shard overlaps the full buffer"), "%s", err);
    CHECK(cb_check_reduce_scatter(&t.g[0], full, full + 10, 10, 4, &ci, err, sizeof err) == 0, "adjacent is apart");
    cb_groups_free(&t);
}

static void test_env(void) {
    char err[256];
    double t = -1;
    unsetenv("WP_COMM_TIMEOUT");
    CHECK(cb_env_seconds("WP_COMM_TIMEOUT", &t, err, sizeof err) == 0 && t == 300, "unset: the default");
    setenv("WP_COMM_TIMEOUT", "", 1);
    CHECK(cb_env_seconds("WP_COMM_TIMEOUT", &t, err, sizeof err) == 0 && t == 300, "empty: the default");
    setenv("WP_COMM_TIMEOUT", "2.5", 1);
    CHECK(cb_env_seconds("WP_COMM_TIMEOUT", &t, err, sizeof err) == 0 && t == 2.5, "read: %g", t);
    setenv("WP_COMM_TIMEOUT", "-1", 1);
    CHECK(cb_env_seconds("WP_COMM_TIMEOUT", &t, err, sizeof err) == -1 &&
          !strncmp(err, "WP_COMM_TIMEOUT=-1: expected a number of seconds >= 0 (", 55), "%s", err);
    setenv("WP_COMM_TIMEOUT", "5s", 1);
    CHECK(cb_env_seconds("WP_COMM_TIMEOUT", &t, err, sizeof err) == -1, "not a number");
    unsetenv("WP_COMM_TIMEOUT");
    unsetenv("WP_SAVE_TIMEOUT");
    CHECK(cb_env_seconds("WP_SAVE_TIMEOUT", &t, err, sizeof err) == 0 && t == 0, "the save's default: no limit");
    CHECK(cb_env_seconds("WP_COMM_MAX_ELEMS", &t, err, sizeof err) == -1, "not a setting of seconds");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double a = cb_since(&t0), b = cb_since(&t0);
    CHECK(a >= 0 && b >= a && b < 10, "the clock runs from t0: %g %g", a, b);
}

/* Pieces: how an operation longer than the limit is cut, and the test hook that sets the limit. */
static void test_pieces(void) {
    char err[256];
    size_t max = 0, len = 0;
    unsetenv("WP_COMM_MAX_ELEMS");
    CHECK(cb_env_max_elems(&max, err, sizeof err) == 0 && max == (size_t)INT_MAX, "unset: INT_MAX, got %zu", max);
    setenv("WP_COMM_MAX_ELEMS", "7", 1);
    CHECK(cb_env_max_elems(&max, err, sizeof err) == 0 && max == 7, "read: %zu", max);
    const char *bad[] = { "0", "-3", "7x", "2147483648", "abc" };
    for (int i = 0; i < 5; i++) {
        setenv("WP_COMM_MAX_ELEMS", bad[i], 1);
        char want[128];
        snprintf(want, sizeof want, "WP_COMM_MAX_ELEMS=%s: expected a whole number from 1 to 2147483647 (", bad[i]);
        CHECK(cb_env_max_elems(&max, err, sizeof err) == -1 && !strncmp(err, want, strlen(want)), "%s: %s", bad[i], err);
    }
    unsetenv("WP_COMM_MAX_ELEMS");
    CHECK(cb_pieces(0, 7) == 1 && cb_pieces(1, 7) == 1 && cb_pieces(7, 7) == 1 && cb_pieces(8, 7) == 2 && cb_pieces(15, 7) == 3,
          "pieces of 0, 1, 7, 8, 15 by 7");
    /* 2^33 floats (a 32 GiB transfer) by INT_MAX: 5 pieces, covering it exactly */
    size_t n = (size_t)1 << 33, np = cb_pieces(n, INT_MAX), sum = 0, next = 0;
    CHECK(np == 5, "2^33 by INT_MAX: %zu pieces", np);
    for (size_t k = 0; k < np; k++) {
        size_t off = cb_piece(n, INT_MAX, k, &len);
        CHECK(off == next && len >= 1 && len <= (size_t)INT_MAX, "piece %zu at %zu, %zu long", k, off, len);
        next = off + len;
        sum += len;
    }
    CHECK(sum == n, "the pieces cover it: %zu of %zu", sum, n);
    CHECK(cb_piece(15, 7, 2, &len) == 14 && len == 1, "the last piece of 15 by 7");
    CHECK(cb_piece(0, 7, 0, &len) == 0 && len == 0, "the one piece of nothing");
}

int main(void) {
    test_groups();
    test_checks();
    test_env();
    test_pieces();
    return check_summary("test_comm_book");
}
