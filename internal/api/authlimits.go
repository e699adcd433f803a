package api

import "time"

// AuthLimits are the auth.* settings the spec applies without a restart
// (auth.session.idleTimeout, .lifetime, .secure, auth.tokens.maxLifetime).
// The node hands every new settings value to SetAuthLimits; requests read
// the value in force when they run.
type AuthLimits struct {
	SessionIdleTimeout, SessionLifetime time.Duration
	// SessionSecure is auto, true or false.
	SessionSecure string
	// TokenMaxLifetime is the default expiry and cap of tokens; 0: none.
	TokenMaxLifetime time.Duration
}

func (l *AuthLimits) defaults() {
	if l.SessionIdleTimeout <= 0 {
		l.SessionIdleTimeout = 30 * time.Minute
	}
	if l.SessionLifetime <= 0 {
		l.SessionLifetime = 12 * time.Hour
	}
	if l.SessionSecure == "" {
		l.SessionSecure = "auto"
	}
	if l.TokenMaxLifetime < 0 {
		l.TokenMaxLifetime = 0
	}
}

// SetAuthLimits replaces the session and token limits in force; sessions
// already issued keep their expiry, their idle timeout follows the new value.
func (s *Server) SetAuthLimits(l AuthLimits) {
	l.defaults()
	s.limits.Store(&l)
}

// authLimits is the value in force.
func (s *Server) authLimits() AuthLimits { return *s.limits.Load() }
