-- a strategy that runs a shell command while it loads: the sandbox has no os (test_sandbox.sh)
os.execute("true")
return { build = function(plan, ctx) end }
