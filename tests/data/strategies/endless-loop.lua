-- a strategy that never ends, and catches the error that stops it: the instruction limit stops
-- it all the same (test_sandbox.sh)
return {
  build = function(plan, ctx)
    while true do pcall(function() while true do end end) end
  end,
}
