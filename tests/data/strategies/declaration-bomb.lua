-- a strategy whose time goes into a library call while its declaration is read (the file's top
-- level runs before any plan is built, for its options): the wall-clock limit holds there too
-- (test_sandbox.sh)
string.rep("a", 300000):find(".-b")
return {
  build = function(plan, ctx) end,
}
