-- a strategy that loads code of its own making (precompiled, which could crash the interpreter):
-- the sandbox has no load (test_sandbox.sh)
return { build = function(plan, ctx) load(string.dump(function() end))() end }
