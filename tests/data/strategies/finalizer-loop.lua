-- a strategy whose finalizer never ends: Lua runs finalizers with hooks off, where no instruction
-- limit could stop it, so the sandbox refuses __gc (test_sandbox.sh)
return {
  build = function(plan, ctx)
    setmetatable({}, { __gc = function() while true do end end })
    collectgarbage()
  end,
}
