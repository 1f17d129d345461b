/* The operation table (ir/op_table.h) as a Lua table, for Lua code that renders or checks plans
 * (the emitter's templates) to read the same rows as the C code. */
#ifndef WP_OP_TABLE_LUA_H
#define WP_OP_TABLE_LUA_H

typedef struct lua_State lua_State;

/* Pushes one table with a row per operation, both under its name and at its OpKind + 1:
 *   { name = "BWD", kind = 1, phase = "compute", order = 2, label = "B", format = "...",
 *     p2p = "send"|"recv"|nil, coll = "bcast"|"reduce"|"allreduce"|"allgather"|"reduce_scatter"|nil,
 *     root = bool, carries = "what"|"W"|"D"|"any"|nil,
 *     chunk = bool, mb = bool, distinct = bool, master = bool, pass_d = bool,
 *     fwd_units = n, recompute_units = n, mem_passes = n,
 *     buf = operand or nil, buf2 = operand or nil }
 * where order is the phase's place in a turn (1 transfers posted, 2 compute, 3 local) and an
 * operand is { kind = "W"|"D"|"any"|"what", role = "weight"|nil, read = bool, write = bool,
 * add = bool, clear = bool, root = { read = ..., ... } (rooted collectives: the use at the root) }. */
void op_table_push_lua(lua_State *L);

#endif
