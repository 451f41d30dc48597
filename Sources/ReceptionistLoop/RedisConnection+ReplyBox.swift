import CHiredis

extension RedisConnection {
    /// Holds a reply callback while hiredis holds its `privdata`.
    final class ReplyBox {
        /// The connection that counts this reply as owed (`pendingCommands`); nil for a
        /// subscription's, which has a reply for every message. Unowned: hiredis calls a box only
        /// while it holds the context, which holds the connection.
        private unowned let connection: RedisConnection?
        let callback: (RedisReplyView?) -> Void

        init(owedTo connection: RedisConnection?, _ callback: @escaping (RedisReplyView?) -> Void) {
            self.connection = connection
            self.callback = callback
        }

        /// Hands hiredis's reply on (nil: the connection was lost), to be read before it is freed.
        func answer(_ reply: UnsafeMutableRawPointer?) {
            connection?.pendingCommands -= 1
            callback(reply.map { RedisReplyView($0.assumingMemoryBound(to: redisReply.self)) })
        }
    }
}
