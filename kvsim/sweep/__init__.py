"""kvsim.sweep"""
