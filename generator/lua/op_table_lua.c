/* The operation table pushed to Lua (op_table_lua.h): every column of op_table[] as fields a
 * script can read, so that Lua code classifies operations by the same rows as the C code. */
#include <lua.h>
#include "lua/op_table_lua.h"
#include "lua/bridge.h"
#include "ir/op_table.h"

static void set_bool(lua_State *L, const char *k, int v) { lua_pushboolean(L, v); lua_setfield(L, -2, k); }

static void push_use(lua_State *L, unsigned u) {
    set_bool(L, "read", (u & USE_READ) != 0);
    set_bool(L, "write", (u & USE_WRITE) != 0);
    set_bool(L, "add", (u & USE_ADD) != 0);
    set_bool(L, "clear", (u & USE_CLEAR) != 0);
}

static void push_operand(lua_State *L, const OpInfo *in, int k) {
    static const char *const kinds[] = { [OPND_W] = "W", [OPND_D] = "D", [OPND_ANY] = "any", [OPND_WHAT] = "what" };
    lua_createtable(L, 0, 7);
    lua_set_str(L, "kind", kinds[in->operand[k]]);
    if (in->role[k]) lua_set_str(L, "role", in->role[k]);
    push_use(L, in->use[k]);
    if (in->root) {
        lua_createtable(L, 0, 4);
        push_use(L, in->root_use[k]);
        lua_setfield(L, -2, "root");
    }
}

void op_table_push_lua(lua_State *L) {
    static const char *const p2p[] = { [P2P_SEND] = "send", [P2P_RECV] = "recv" };
    static const char *const carries[] = { [CARRY_WHAT] = "what", [CARRY_W] = "W", [CARRY_D] = "D", [CARRY_ANY] = "any",
                                           [CARRY_TIED] = "tied" };
    _Static_assert(sizeof carries / sizeof *carries == CARRY__COUNT, "a name for every OpCarry");
    lua_createtable(L, OP__COUNT, OP__COUNT);
    for (int k = 0; k < OP__COUNT; k++) {
        const OpInfo *in = op_info(k);
        lua_createtable(L, 0, 24);
        lua_set_str(L, "name", in->name);
        lua_set_int(L, "kind", k);
        lua_set_str(L, "phase", op_phase_names[in->phase]);
        lua_set_int(L, "order", in->phase + 1);
        if (in->label) lua_set_str(L, "label", in->label);
        lua_set_str(L, "format", in->format);
        if (in->p2p) lua_set_str(L, "p2p", p2p[in->p2p]);
        if (in->coll) lua_set_str(L, "coll", op_coll_names[in->coll]);
        set_bool(L, "root", in->root);
        if (in->carries) lua_set_str(L, "carries", carries[in->carries]);
        set_bool(L, "chunk", (in->flags & OPF_CHUNK) != 0);
        set_bool(L, "mb", (in->flags & OPF_MB) != 0);
        set_bool(L, "distinct", (in->flags & OPF_DISTINCT) != 0);
        set_bool(L, "master", (in->flags & OPF_MASTER) != 0);
        set_bool(L, "pass_d", (in->flags & OPF_PASS_D) != 0);
        set_bool(L, "fp32", (in->flags & OPF_FP32) != 0);
        set_bool(L, "rides", (in->flags & OPF_RIDES) != 0);
        lua_set_num(L, "fwd_units", in->fwd_units);
        lua_set_num(L, "recompute_units", in->recompute_units);
        lua_set_num(L, "mem_passes", in->mem_passes);
        for (int o = 0; o < 2; o++)
            if (in->operand[o] != OPND_NONE) {
                push_operand(L, in, o);
                lua_setfield(L, -2, o ? "buf2" : "buf");
            }
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, in->name);
        lua_rawseti(L, -2, k + 1);
    }
}
