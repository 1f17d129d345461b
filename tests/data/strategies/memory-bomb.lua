-- a strategy that takes memory without end, and catches the errors of the allocations refused:
-- the memory limit stops it all the same (test_sandbox.sh)
return {
  build = function(plan, ctx)
    local keep, i = {}, 0
    while true do
      i = i + 1
      pcall(function() keep[i] = string.rep("x", 1 << 20) .. i end)
    end
  end,
}
