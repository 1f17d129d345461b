-- a strategy that raises an error without a message: the message still says where (test_sandbox.sh)
return {
  build = function(plan, ctx)
    error(nil)
  end,
}
