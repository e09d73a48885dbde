"""kvsim.specs"""
