"""kvsim.cost"""
