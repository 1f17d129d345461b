-- a strategy that ends wpgen with status 0 and no output: the sandbox has no os.exit (test_sandbox.sh)
return { build = function(plan, ctx) os.exit(0) end }
