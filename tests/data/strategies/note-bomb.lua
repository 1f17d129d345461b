-- a strategy that makes wpgen hold its memory instead of Lua: 500 notes of 1 MiB each. What the
-- plan holds for it counts against --lua-max-mib too (test_sandbox.sh)
return {
  build = function(plan, ctx)
    local mib = string.rep("x", 1 << 20)
    for _ = 1, 500 do plan:note(mib) end
  end,
}
