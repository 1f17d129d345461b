-- a strategy with a syntax error, for the CLI test
return {
  build = function(plan, ctx)
    local x = = 1
  end,
}
