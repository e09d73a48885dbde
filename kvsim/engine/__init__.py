"""kvsim.engine"""
