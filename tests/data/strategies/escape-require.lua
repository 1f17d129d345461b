-- a strategy that requires a module from outside schedules/lib (Penlight's, which opens files):
-- the sandbox's require takes only the modules of schedules/lib (test_sandbox.sh)
local template = require("pl.template")
return { build = function(plan, ctx) end }
