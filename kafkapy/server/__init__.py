"""kafkapy.server"""
