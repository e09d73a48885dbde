"""kvsim.kvcache"""
