${P.first_hash}
${P.header_hash}
#
# Open MPI rankfile: each rank on its node of the topology, at its device's slot.
# mpirun -np ${P.nranks} --rankfile rankfile ./train ...
# The node names are the topology's; they must resolve as host names.
@ for _, d in ipairs(ranks) do
rank ${d.rank}=${P.nodes[d.node + 1]} slot=${d.slot}
@ end
