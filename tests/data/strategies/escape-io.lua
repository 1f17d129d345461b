-- a strategy that reads a file: the sandbox has no io (test_sandbox.sh)
local f = io.open("/etc/hostname")
return { build = function(plan, ctx) end }
