"""kvsim.calibrate"""
