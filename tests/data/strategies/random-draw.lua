-- a strategy that draws random numbers and refuses, saying which: the same inputs must give the
-- same output, so math.random starts from a fixed seed (test_sandbox.sh)
local wp = require("wp")
return {
  build = function(plan, ctx)
    wp.bad_option(nil, string.format("random-draw: drew %d %d", math.random(1, 1000000000), math.random(1, 1000000000)))
  end,
}
