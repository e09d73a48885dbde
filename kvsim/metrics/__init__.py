"""kvsim.metrics"""
