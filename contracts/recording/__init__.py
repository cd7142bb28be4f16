"""recording"""
