"""kvsim.workload"""
