-- a strategy whose time goes into one call of the string library, where the instruction count
-- cannot see it (a pattern that backtracks over 300,000 characters runs for minutes): the
-- wall-clock limit stops wpgen all the same (test_sandbox.sh)
return {
  build = function(plan, ctx)
    string.rep("a", 300000):find(".-b")
  end,
}
