-- a strategy that fails while building, for the CLI test
local function place(plan)
  plan:chunks({ 1, 1, 1, 1 })
  plan:owner(0, 99)   -- no such rank
end
return { build = function(plan, ctx) place(plan) end }
