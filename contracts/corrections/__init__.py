"""corrections"""
